"""rocketq.remoting"""
