"""rocketq.filter"""
